#!/usr/bin/env bash
# Starts a real Prefect API server (`prefect server start`, SQLite, no UI, analytics off) on
# 127.0.0.1:$PREFECT_PORT (default 14200) in the background, in its own process group; PID in
# $CI_RUN_DIR/prefect-$PREFECT_PORT.pid. Its home (database, result storage, log) is $PREFECT_HOME
# (default $CI_STATE_DIR/prefect-$PREFECT_PORT); the test fixture passes a temporary folder.
# Idempotent: a server that already answers on the port is reused.
# Prints `PREFECT_API_URL=http://127.0.0.1:$PREFECT_PORT/api` as its last line on success.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
REPO="$(cd "$HERE/../../.." && pwd)"
PREFECT_PORT="${PREFECT_PORT:-14200}"
PREFECT_BIN="${PREFECT_BIN:-$REPO/.venv/bin/prefect}"
PYTHON="${PYTHON:-$REPO/.venv/bin/python}"
PIDFILE="$CI_RUN_DIR/prefect-$PREFECT_PORT.pid"
URL="http://127.0.0.1:$PREFECT_PORT/api"
export PREFECT_HOME="${PREFECT_HOME:-$CI_STATE_DIR/prefect-$PREFECT_PORT}"
export PREFECT_LOCAL_STORAGE_PATH="${PREFECT_LOCAL_STORAGE_PATH:-$PREFECT_HOME/storage}"
export PREFECT_SERVER_ANALYTICS_ENABLED=false
LOG="$PREFECT_HOME/server.log"
mkdir -p "$PREFECT_HOME" "$PREFECT_LOCAL_STORAGE_PATH"

up() { "$PYTHON" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1] + '/health', timeout=3)" "$URL"; }

if up 2>/dev/null; then
  echo "Prefect server already up on $URL"; echo "PREFECT_API_URL=$URL"; exit 0
fi
[ -x "$PREFECT_BIN" ] || { echo "no prefect CLI at $PREFECT_BIN: run 'make venv' first" >&2; exit 1; }
if [ -s "$PIDFILE" ] && alive "$(cat "$PIDFILE")"; then
  echo "Prefect server (pid $(cat "$PIDFILE")) is starting; waiting for it"
else
  # the server must not talk to another API, nor to the ephemeral one
  env -u PREFECT_API_URL \
    PREFECT_SERVER_API_HOST=127.0.0.1 PREFECT_SERVER_API_PORT="$PREFECT_PORT" \
    PREFECT_UI_ENABLED=false \
    setsid "$PREFECT_BIN" server start --host 127.0.0.1 --port "$PREFECT_PORT" --no-ui \
      --analytics-off >"$LOG" 2>&1 < /dev/null &
  echo $! > "$PIDFILE"
fi
up_or_dead() { up 2>/dev/null || ! alive "$(cat "$PIDFILE")"; }
if ! wait_for "Prefect server on $URL" "${PREFECT_START_TIMEOUT:-180}" up_or_dead || ! up 2>/dev/null; then
  tail -40 "$LOG" >&2; exit 1
fi
echo "Prefect server up on $URL (pid $(cat "$PIDFILE"), home $PREFECT_HOME)"
echo "PREFECT_API_URL=$URL"
