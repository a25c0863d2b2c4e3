#!/usr/bin/env bash
# Starts a single-node Ray head on loopback with the dashboard (Jobs API) on
# http://127.0.0.1:$RAY_DASHBOARD_PORT (default 8265), in the background as `ray start --block`;
# its PID goes to $CI_RUN_DIR/ray.pid (SIGTERM to it tears down GCS, raylet, dashboard, workers).
# Idempotent: a dashboard that already answers is reused.
#  - RAY_AUTH_MODE=disabled here and in every client (tests export it too);
#  - --node-ip-address 127.0.0.1 and RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 keep all traffic on loopback
#    (the latter stops Ray rewriting 127.0.0.1 to the routable address for job drivers);
#  - the venv's bin first on PATH: job entrypoints run in the head's environment;
#  - workers listen on 20000-20999 (RAY_MIN/MAX_WORKER_PORT), not Ray's default 10002-19999,
#    which holds the other services' fixed ports (Prefect 14200, MLflow 15000, Airflow 15432/18080):
#    a Ray worker that took one of them made that service's start fail;
#  - the object store is capped (RAY_OBJECT_STORE_BYTES, default 200 MB);
#  - on a heavily loaded machine a Ray subprocess (seen: ray_client_server, which waits 30 s for the
#    raylet) can die during start-up, and `--block` then tears the head down: the start is
#    retried (RAY_START_ATTEMPTS, default 3) until the head has been up and stable for a while.
# Start-up takes 6-11 s; the head uses ~1.8 GB RSS.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
shared_daemon_env
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
if [ -s "$PIDFILE" ] && alive "$(cat "$PIDFILE")"; then
  # started by another caller and still coming up: wait for it (keeps its PID file)
  echo "ray head (pid $(cat "$PIDFILE")) is starting; waiting for it"
  up_or_dead() { up 2>/dev/null || ! alive "$(cat "$PIDFILE")"; }
  if wait_for "ray head on $URL" 240 up_or_dead && up 2>/dev/null; then exit 0; fi
  echo "the ray head that was starting did not come up" >&2; tail -15 "$LOG" >&2; exit 1
fi
[ -x "$RAY" ] || { echo "no ray at $RAY: run 'make venv' first" >&2; exit 1; }
export PATH="$(dirname "$RAY"):$PATH"
export RAY_AUTH_MODE=disabled
export RAY_USAGE_STATS_ENABLED=0
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
TMP="${RAY_TMP:-$CI_STATE_DIR/ray}"; mkdir -p "$TMP"

# start_once: starts `ray start --block` and waits until the dashboard answers, the start-up
# finished ("Ray runtime started") and the head is still alive a few seconds later.
start_once() {
  "$RAY" start --head --block --node-ip-address 127.0.0.1 --port "$GCS_PORT" \
      --num-cpus "${RAY_NUM_CPUS:-4}" --object-store-memory "${RAY_OBJECT_STORE_BYTES:-200000000}" \
      --include-dashboard=true --dashboard-host 127.0.0.1 --dashboard-port "$PORT" \
      --min-worker-port "${RAY_MIN_WORKER_PORT:-20000}" --max-worker-port "${RAY_MAX_WORKER_PORT:-20999}" \
      --disable-usage-stats --temp-dir "$TMP" >"$LOG" 2>&1 &
  local pid=$! i
  echo "$pid" > "$PIDFILE"
  for i in $(seq 1 480); do
    alive "$pid" || return 1
    if grep -q "Ray runtime started" "$LOG" && up 2>/dev/null; then
      sleep "${RAY_STABLE_S:-5}"
      alive "$pid" && up 2>/dev/null && return 0
      return 1
    fi
    sleep 0.5
  done
  echo "timed out after 240s waiting for the ray head" >&2
  return 1
}

for attempt in $(seq 1 "${RAY_START_ATTEMPTS:-3}"); do
  if start_once; then
    echo "ray head up on $URL (pid $(cat "$PIDFILE"), attempt $attempt)"; exit 0
  fi
  echo "ray head start attempt $attempt failed:" >&2; tail -15 "$LOG" >&2
  bash "$HERE/stop.sh" >&2 || true
done
exit 1
