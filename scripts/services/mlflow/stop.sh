#!/usr/bin/env bash
# Stops the MLflow server that start.sh started on $MLFLOW_PORT: SIGTERM to the process group of
# the recorded PID (start.sh ran it under setsid, so the group is the server and its workers
# only), SIGKILL after 20 s. A PID file whose process is gone, or now another program, is removed.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
MLFLOW_PORT="${MLFLOW_PORT:-15000}"
PIDFILE="$CI_RUN_DIR/mlflow-$MLFLOW_PORT.pid"
[ -s "$PIDFILE" ] || exit 0
pid="$(cat "$PIDFILE")"
if ! alive "$pid"; then rm -f "$PIDFILE"; exit 0; fi
if [ "$(ps -o pgid= -p "$pid" | tr -d ' ')" != "$pid" ] || \
   ! tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q "mlflow server"; then
  echo "not stopping pid $pid from $PIDFILE: not the mlflow server group start.sh started"
  rm -f "$PIDFILE"; exit 0
fi
group_alive() { pgrep -g "$pid" >/dev/null 2>&1; }
kill -TERM -- "-$pid" 2>/dev/null || true
for _ in $(seq 1 80); do group_alive || break; sleep 0.25; done
if group_alive; then
  echo "mlflow server group $pid ignored SIGTERM for 20s: SIGKILL"
  kill -KILL -- "-$pid" 2>/dev/null || true
fi
rm -f "$PIDFILE"
echo "stopped mlflow server $pid ($PIDFILE)"
