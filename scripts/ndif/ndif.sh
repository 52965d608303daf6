#!/usr/bin/env bash
# A local NDIF deployment on 127.0.0.1 only: `setup` builds its environment in .ndif/, `start` runs Redis, an S3
# object store, a Ray head with NDIF's controller and the NDIF API, `stop` ends them, `status` lists them.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
HOME_DIR="${NDIF_LOCAL_HOME:-$ROOT/.ndif}"
VENV="$HOME_DIR/venv"
RUN="$HOME_DIR/run"
PYTHON="${NDIF_PYTHON:-python3}"
NDIF_VERSION=0.1.2
REDIS_PORT=6379 S3_PORT=9000 RAY_PORT=6385 RAY_CLIENT_PORT=10001 API_PORT="${NDIF_API_PORT:-8001}"

export NDIF_REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
export NDIF_OBJECT_STORE_URL="http://127.0.0.1:$S3_PORT"
export NDIF_RAY_ADDRESS="ray://127.0.0.1:$RAY_CLIENT_PORT"
export NDIF_API_URL="http://127.0.0.1:$API_PORT"
export NDIF_DEFAULT_DTYPE=float32            # the audit's numbers are float32 on both sides
export HF_HUB_CACHE="$HOME_DIR/hub" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export GRPC_ENABLE_FORK_SUPPORT=0 RAY_USAGE_STATS_ENABLED=0

setup() {
    # ndif declares Python 3.12-3.13; none is packaged for this Debian, so 3.11 is used with --ignore-requires-python
    # and the versions pinned to the audit's own environment.
    command -v redis-server >/dev/null || { echo "redis-server missing: apt-get install redis-server" >&2; exit 1; }
    [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install -q --ignore-requires-python -c "$ROOT/scripts/ndif/pins.txt" \
        torch "ndif[api,ray]==$NDIF_VERSION" "moto[server]"
    PYTHONPATH="$ROOT/lib" "${AUDIT_PYTHON:-$ROOT/.venv/bin/python}" -m llmaudit.models.hubcache "$HF_HUB_CACHE"
}

spawn() {  # name, command...: run detached in its own session, log and pid under .ndif/run
    local name=$1; shift
    setsid "$@" >"$RUN/$name.log" 2>&1 < /dev/null &
    echo $! >"$RUN/$name.pid"
}

start() {
    [ -x "$VENV/bin/ndif" ] || { echo "no NDIF environment: run $0 setup first" >&2; exit 1; }
    mkdir -p "$RUN" "$HOME_DIR/ray"
    export PATH="$VENV/bin:$PATH"
    spawn redis redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no
    spawn s3 moto_server -H 127.0.0.1 -p "$S3_PORT"
    ray start --head --node-ip-address=127.0.0.1 --port="$RAY_PORT" --ray-client-server-port="$RAY_CLIENT_PORT" \
        --include-dashboard=true --dashboard-host=127.0.0.1 --dashboard-port=8265 --temp-dir="$HOME_DIR/ray" \
        --resources="$(python -m ndif.services.ray.resources --head)" >"$RUN/ray.log" 2>&1
    RAY_ADDRESS="127.0.0.1:$RAY_PORT" python -m ndif.services.ray.deployments.controller.controller \
        >"$RUN/controller.log" 2>&1
    spawn api gunicorn --config python:ndif.services.api.gunicorn_conf --bind "127.0.0.1:$API_PORT" \
        ndif.services.api.app:app
    for _ in $(seq 60); do
        curl -sf "$NDIF_API_URL/ping" >/dev/null 2>&1 && { echo "NDIF API up at $NDIF_API_URL"; return; }
        sleep 2
    done
    echo "NDIF API did not answer at $NDIF_API_URL: see $RUN/api.log" >&2; exit 1
}

stop() {
    for name in api s3 redis; do
        [ -f "$RUN/$name.pid" ] || continue
        kill -- "-$(cat "$RUN/$name.pid")" 2>/dev/null || true
        rm -f "$RUN/$name.pid"
    done
    [ -x "$VENV/bin/ray" ] && "$VENV/bin/ray" stop --force >/dev/null 2>&1 || true
    echo "local NDIF stopped"
}

status() {
    for name in redis s3 api; do
        if [ -f "$RUN/$name.pid" ] && kill -0 "$(cat "$RUN/$name.pid")" 2>/dev/null; then
            echo "$name: running (pid $(cat "$RUN/$name.pid"))"; else echo "$name: stopped"; fi
    done
    curl -s "$NDIF_API_URL/status" 2>/dev/null | head -c 2000 || echo "api: no answer"
    echo
}

case "${1:-}" in
    setup|start|stop|status) "$1" ;;
    *) echo "usage: $0 setup|start|stop|status" >&2; exit 2 ;;
esac
