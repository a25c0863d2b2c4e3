#!/usr/bin/env bash
# Starts an MLflow tracking server on http://127.0.0.1:$MLFLOW_PORT (default 15000) in the
# background, in its own session (setsid): the server runs its web workers as child processes,
# and stop.sh stops the whole process group of the recorded PID ($CI_RUN_DIR/mlflow.pid).
# Runs, params and tags in SQLite, artifacts served by the server itself (--serve-artifacts,
# mlflow-artifacts:/ URIs), both under $CI_STATE_DIR/mlflow/data-$MLFLOW_PORT.
# Idempotent: a server that already answers on the port is reused.
# Clients: MLFLOW_TRACKING_URI=http://127.0.0.1:$MLFLOW_PORT
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
shared_daemon_env
MLFLOW_PORT="${MLFLOW_PORT:-15000}"
VENV="${MLFLOW_VENV:-$CI_STATE_DIR/mlflow/venv}"
DATA="${MLFLOW_DATA:-$CI_STATE_DIR/mlflow/data-$MLFLOW_PORT}"
PIDFILE="$CI_RUN_DIR/mlflow-$MLFLOW_PORT.pid"
LOG="$CI_STATE_DIR/mlflow-$MLFLOW_PORT.log"
URL="http://127.0.0.1:$MLFLOW_PORT"

up() { "$VENV/bin/python" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1] + '/health', timeout=2)" "$URL"; }

[ -x "$VENV/bin/mlflow" ] || { echo "no mlflow server in $VENV: run $HERE/install.sh first" >&2; exit 1; }
if up 2>/dev/null; then echo "mlflow server already up on $URL"; exit 0; fi
if [ -s "$PIDFILE" ] && alive "$(cat "$PIDFILE")"; then
  echo "mlflow server (pid $(cat "$PIDFILE")) is starting; waiting for it"
else
  mkdir -p "$DATA/artifacts"
  # no background job runner (huey consumers): the tracker needs runs, tags and artifacts only
  MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false \
  setsid "$VENV/bin/mlflow" server --host 127.0.0.1 --port "$MLFLOW_PORT" --workers 1 \
      --backend-store-uri "sqlite:///$DATA/mlflow.db" \
      --artifacts-destination "$DATA/artifacts" --serve-artifacts \
      >"$LOG" 2>&1 < /dev/null &
  echo $! > "$PIDFILE"
fi
up_or_dead() { up 2>/dev/null || ! alive "$(cat "$PIDFILE")"; }
if ! wait_for "mlflow server on $URL" 180 up_or_dead || ! up 2>/dev/null; then
  tail -30 "$LOG" >&2; exit 1
fi
echo "mlflow server up on $URL (pid $(cat "$PIDFILE"))"
