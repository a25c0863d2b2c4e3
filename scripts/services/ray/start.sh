#!/usr/bin/env bash
# Starts a single-node Ray head on loopback with the dashboard (Jobs API) on
# http://127.0.0.1:$RAY_DASHBOARD_PORT (default 8265), in the background as `ray start --block`;
# its PID goes to $CI_RUN_DIR/ray.pid (SIGTERM to it tears down GCS, raylet, dashboard, workers).
# Idempotent: a dashboard that already answers is reused.
#  - RAY_AUTH_MODE=disabled here and in every client (tests export it too);
#  - --node-ip-address 127.0.0.1 and RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 keep all traffic on loopback
#    (the latter stops Ray rewriting 127.0.0.1 to the routable address for job drivers);
#  - the venv's bin first on PATH: job entrypoints run in the head's environment;
#  - the object store is capped (RAY_OBJECT_STORE_BYTES, default 200 MB).
# Start-up takes 6-11 s; the head uses ~1.8 GB RSS.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
REPO="$(cd "$HERE/../../.." && pwd)"
RAY="${RAY:-$REPO/.venv/bin/ray}"
PYTHON="${PYTHON:-$REPO/.venv/bin/python}"
PORT="${RAY_DASHBOARD_PORT:-8265}"
GCS_PORT="${RAY_GCS_PORT:-6379}"
PIDFILE="$CI_RUN_DIR/ray.pid"
LOG="$CI_STATE_DIR/ray-head.log"
URL="http://127.0.0.1:$PORT"

up() { "$PYTHON" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1] + '/api/version', timeout=2)" "$URL"; }

if up 2>/dev/null; then echo "ray head already up on $URL"; exit 0; fi
[ -x "$RAY" ] || { echo "no ray at $RAY: run 'make venv' first" >&2; exit 1; }
export PATH="$(dirname "$RAY"):$PATH"
export RAY_AUTH_MODE=disabled
export RAY_USAGE_STATS_ENABLED=0
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
TMP="${RAY_TMP:-$CI_STATE_DIR/ray}"; mkdir -p "$TMP"
"$RAY" start --head --block --node-ip-address 127.0.0.1 --port "$GCS_PORT" \
    --num-cpus "${RAY_NUM_CPUS:-4}" --object-store-memory "${RAY_OBJECT_STORE_BYTES:-200000000}" \
    --include-dashboard=true --dashboard-host 127.0.0.1 --dashboard-port "$PORT" \
    --disable-usage-stats --temp-dir "$TMP" >"$LOG" 2>&1 &
echo $! > "$PIDFILE"
if ! wait_for "ray dashboard on $URL" 90 up; then tail -30 "$LOG" >&2; exit 1; fi
echo "ray head up on $URL (pid $(cat "$PIDFILE"))"
