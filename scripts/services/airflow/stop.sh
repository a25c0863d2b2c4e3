#!/usr/bin/env bash
# Stops the Airflow deployment that start.sh started, by its recorded PIDs only: each Airflow
# process's group (start.sh gave each one its own; its workers and subprocesses are in it), then
# PostgreSQL. Apps that DAGs started on the local scheduler are not touched (tests cancel theirs).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
. "$HERE/env.sh"

# stop_group NAME: SIGTERM to the process group led by the recorded PID, SIGKILL after 30 s.
stop_group() {
  local f="$CI_RUN_DIR/$AIRFLOW_DEPLOYMENT-$1.pid" p i
  [ -s "$f" ] || return 0
  p="$(cat "$f")"
  if ! alive "$p" || ! tr '\0' ' ' < "/proc/$p/cmdline" | grep -q airflow; then rm -f "$f"; return 0; fi
  kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true
  for i in $(seq 1 120); do alive "$p" || break; sleep 0.25; done
  kill -KILL -- "-$p" 2>/dev/null || true
  rm -f "$f"
  echo "stopped airflow $1 ($p)"
}
for name in scheduler triggerer dag-processor api-server; do stop_group "$name"; done
stop_pidfile "$CI_RUN_DIR/$AIRFLOW_DEPLOYMENT-postgres.pid" postgres 30
