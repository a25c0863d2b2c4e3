#!/usr/bin/env bash
# Starts a moto server (AWS API emulator) on 127.0.0.1:$MOTO_PORT (default 5055) in the background,
# PID in $CI_RUN_DIR/moto.pid. Its Batch backend runs each job as a real container on the local
# dockerd (started here through ../docker/start.sh, which also imports busybox:latest and tags it
# docker.io/library/busybox:latest, so moto never pulls). Container stdout lands in the moto
# CloudWatch Logs group /aws/batch/job.
# Idempotent: a moto server that already answers on the port is reused.
# Clients: endpoint_url=http://127.0.0.1:$MOTO_PORT, any access key, region us-east-1.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
shared_daemon_env
REPO="$(cd "$HERE/../../.." && pwd)"
MOTO_PORT="${MOTO_PORT:-5055}"
MOTO_SERVER="${MOTO_SERVER:-$REPO/.venv/bin/moto_server}"
PYTHON="${PYTHON:-$REPO/.venv/bin/python}"
PIDFILE="$CI_RUN_DIR/moto.pid"
LOG="$CI_STATE_DIR/moto.log"
URL="http://127.0.0.1:$MOTO_PORT"

# (the dashboard page: small and constant; /moto-api/data.json dumps the whole state and grows
# with every job, too slow to answer a health check on a loaded machine)
up() { "$PYTHON" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1] + '/moto-api/', timeout=5)" "$URL"; }

bash "$HERE/../docker/start.sh"
if up 2>/dev/null; then
  echo "moto server already up on $URL"; exit 0
fi
[ -x "$MOTO_SERVER" ] || { echo "no moto_server at $MOTO_SERVER: run 'make venv' first" >&2; exit 1; }
if [ -s "$PIDFILE" ] && alive "$(cat "$PIDFILE")"; then
  # started by another caller and still coming up: wait for it (keeps its PID file)
  echo "moto server (pid $(cat "$PIDFILE")) is starting; waiting for it"
else
  # The server process's environment decides where Batch containers run: on the local dockerd,
  # with host networking (no traffic to bridge addresses; nodes of a multi-node job reach each
  # other on 127.0.0.1).
  MOTO_DOCKER_NETWORK_MODE=host DOCKER_HOST="${DOCKER_HOST:-unix:///var/run/docker.sock}" \
  AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_DEFAULT_REGION=us-east-1 \
    "$MOTO_SERVER" -H 127.0.0.1 -p "$MOTO_PORT" >"$LOG" 2>&1 &
  echo $! > "$PIDFILE"
fi
# up, or fail fast when the server died (wait_for alone would wait for the whole timeout)
up_or_dead() { up 2>/dev/null || ! alive "$(cat "$PIDFILE")"; }
if ! wait_for "moto server on $URL" 120 up_or_dead || ! up 2>/dev/null; then
  tail -30 "$LOG" >&2; exit 1
fi
echo "moto server up on $URL (pid $(cat "$PIDFILE"))"
