#!/usr/bin/env bash
# A local NDIF deployment on 127.0.0.1 only: `setup` builds its environment in .ndif/, `start` runs Redis, an S3
# object store, a Ray head with NDIF's controller, the default model pre-deployed with its size, and the NDIF API,
# `stop` ends what `start` started, `status` lists it. scripts/ndif/README.md says what differs from NDIF on a GPU.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
HOME_DIR="${NDIF_LOCAL_HOME:-$ROOT/.ndif}"
VENV="$HOME_DIR/venv"
RUN="$HOME_DIR/run"
PYTHON="${NDIF_PYTHON:-python3.11}"  # README: why 3.11, not the 3.12 ndif declares
NDIF_VERSION=0.1.2
REDIS_PORT=6379 S3_PORT=9000 RAY_PORT=6385 RAY_CLIENT_PORT=10001 API_PORT="${NDIF_API_PORT:-8001}"
# The default model as the audit's client names it (nnsight's to_model_key for params/*-remote.yaml's model.hf)
MODEL_REPO=llmaudit/smollm2-135m-instruct-q4_1-f32
MODEL_KEY='nnsight.modeling.transformers.TransformersModel:{"repo_id": "'$MODEL_REPO'", "revision": null, "task": "text-generation"}'
# The GPU memory the Ray head declares (Ray's resources are logical; the CPU actor holds the weights in RAM)
DECLARED_GPU_BYTES=$((4 * 1024 ** 3)) DECLARED_CPU_BYTES=$((8 * 1024 ** 3))

export NDIF_REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
export NDIF_OBJECT_STORE_URL="http://127.0.0.1:$S3_PORT"
export NDIF_RAY_ADDRESS="ray://127.0.0.1:$RAY_CLIENT_PORT"
export NDIF_API_URL="http://127.0.0.1:$API_PORT"
export NDIF_DEFAULT_DTYPE=float32                     # the audit's numbers are float32 on both sides
export NDIF_MODEL_IMPORT_PATH=cpu_actor.CPUModelActor  # NDIF's setting for the model actor class (cpu_actor.py)
export NDIF_AUTOSCALING_MAX_REPLICAS=1                # a scale-up deploys without a size: never scale past one
export HF_HUB_CACHE="$HOME_DIR/hub" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export GRPC_ENABLE_FORK_SUPPORT=0 RAY_USAGE_STATS_ENABLED=0

setup() {
    command -v redis-server >/dev/null || [ "$(id -u)" != 0 ] || apt-get install -y -qq redis-server >/dev/null \
        || { apt-get update -qq && apt-get install -y -qq redis-server >/dev/null; }
    command -v redis-server >/dev/null || { echo "redis-server missing: apt-get install redis-server" >&2; exit 1; }
    command -v "$PYTHON" >/dev/null || { echo "$PYTHON missing: set NDIF_PYTHON to a CPython 3.11" >&2; exit 1; }
    [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install -q --ignore-requires-python -c "$ROOT/scripts/ndif/pins.txt" \
        torch "ndif[api,ray]==$NDIF_VERSION" "moto[server]"
    PYTHONPATH="$ROOT/lib" "${AUDIT_PYTHON:-$ROOT/.venv/bin/python}" -m llmaudit.models.loading.hubcache "$HF_HUB_CACHE"
}

spawn() {  # name, command...: run detached in a session of its own (its id: the pid), log and pid under .ndif/run
    local name=$1; shift
    setsid "$@" >"$RUN/$name.log" 2>&1 < /dev/null &
    echo $! >"$RUN/$name.pid"
}

wait_for() {  # what, tries, command...: poll until the command succeeds
    local what=$1 tries=$2; shift 2
    for _ in $(seq "$tries"); do "$@" >/dev/null 2>&1 && return; sleep 1; done
    echo "$what did not come up: see the logs in $RUN" >&2; stop >&2; exit 1
}

deployment() {  # the deploy file: the default model pinned, one replica, float32, its size measured from its weights
    local weights
    weights="$(stat -L -c %s "$HF_HUB_CACHE/models--${MODEL_REPO//\//--}/snapshots/"*/model.safetensors)"
    printf 'models:\n  - checkpoint: %s\n    model_key: %s\n    size_bytes: %s\n    dtype: float32\n    pinned: true\n    replicas: 1\n' \
        "$MODEL_REPO" "'$MODEL_KEY'" "$weights" >"$RUN/models.yaml"
}

start() {
    [ -x "$VENV/bin/ndif" ] || { echo "no NDIF environment: run $0 setup first" >&2; exit 1; }
    status >/dev/null && { echo "local NDIF already running ($0 status)"; return; }
    stop >/dev/null  # whatever part of an earlier start still runs
    mkdir -p "$RUN" "$HOME_DIR/ray"
    export PATH="$VENV/bin:$PATH" PYTHONPATH="$ROOT/scripts/ndif"  # Ray's workers import cpu_actor from here
    spawn redis redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no
    spawn s3 moto_server -H 127.0.0.1 -p "$S3_PORT"
    spawn ray ray start --head --block --node-ip-address=127.0.0.1 --port="$RAY_PORT" \
        --ray-client-server-port="$RAY_CLIENT_PORT" --include-dashboard=true --dashboard-host=127.0.0.1 \
        --dashboard-port=8265 --temp-dir="$HOME_DIR/ray" --num-cpus=2 --num-gpus=1 \
        --resources="{\"head\": 10, \"cuda_memory_bytes\": $DECLARED_GPU_BYTES, \"cpu_memory_bytes\": $DECLARED_CPU_BYTES}"
    wait_for "Ray head" 90 ray status --address="127.0.0.1:$RAY_PORT"
    RAY_ADDRESS="127.0.0.1:$RAY_PORT" python -m ndif.services.ray.deployments.controller.controller \
        >"$RUN/controller.log" 2>&1
    deployment
    ndif deploy -f "$RUN/models.yaml" >"$RUN/deploy.log" 2>&1 \
        || { cat "$RUN/deploy.log" >&2; echo "deploying $MODEL_REPO failed" >&2; stop >&2; exit 1; }
    spawn api gunicorn --config python:ndif.services.api.gunicorn_conf --bind "127.0.0.1:$API_PORT" \
        ndif.services.api.app:app
    wait_for "NDIF API" 90 curl -sf "$NDIF_API_URL/ping"
    echo "NDIF API up at $NDIF_API_URL, $MODEL_REPO deployed ($(grep -o 'size_bytes: [0-9]*' "$RUN/models.yaml"))"
}

stop() {  # ends each session that start spawned, by its recorded id (Ray's actors run in process groups of their own)
    for name in api ray s3 redis; do
        [ -f "$RUN/$name.pid" ] || continue
        local sid; sid="$(cat "$RUN/$name.pid")"
        pkill -TERM -s "$sid" 2>/dev/null || true
        for _ in $(seq 30); do pgrep -s "$sid" >/dev/null || break; sleep 1; done
        pkill -KILL -s "$sid" 2>/dev/null || true
        rm -f "$RUN/$name.pid"
    done
    echo "local NDIF stopped"
}

status() {  # exit status 0 when every part runs
    local down=0
    for name in redis s3 ray api; do
        if [ -f "$RUN/$name.pid" ] && kill -0 "$(cat "$RUN/$name.pid")" 2>/dev/null; then
            echo "$name: running (pid $(cat "$RUN/$name.pid"))"; else echo "$name: stopped"; down=1; fi
    done
    curl -s "$NDIF_API_URL/status" 2>/dev/null | head -c 2000 || echo "api: no answer"
    echo
    return "$down"
}

check() {  # the remote chapters, the same chapters run locally, the server tests, and every row compared
    local py="${AUDIT_PYTHON:-$ROOT/.venv/bin/python}" reports="${NDIF_REPORTS:-$ROOT/reports/ndif}"
    curl -sf "$NDIF_API_URL/ping" >/dev/null 2>&1 || { echo "no local NDIF at $NDIF_API_URL: make ndif" >&2; exit 2; }
    cd "$ROOT"
    "$py" -m llmaudit audit params/smollm2-135m-instruct-remote.yaml --reports "$reports"
    "$py" -m llmaudit audit ci --chapter steering_vectors --chapter decision_tasks --reports "$reports"
    "$py" -m pytest -q -p no:cacheprovider tests/test_ndif_server.py
    PYTHONPATH="$ROOT/lib" "$py" scripts/ndif/compare.py "$reports/ci" "$reports/smollm2-135m-instruct-remote" \
        --markdown "$reports/comparison.md"
}

case "${1:-}" in
    setup|start|stop|status|check) "$1" ;;
    *) echo "usage: $0 setup|start|stop|status|check" >&2; exit 2 ;;
esac
