#!/usr/bin/env bash
# Stops the Prefect server that start.sh started on $PREFECT_PORT (default 14200): SIGTERM to the
# process group led by the recorded PID (start.sh runs it under setsid), SIGKILL after 30 s.
# A PID that now belongs to another program (stale file) is left alone.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
PREFECT_PORT="${PREFECT_PORT:-14200}"
PIDFILE="$CI_RUN_DIR/prefect-$PREFECT_PORT.pid"
[ -s "$PIDFILE" ] || exit 0
p="$(cat "$PIDFILE")"
if ! alive "$p"; then rm -f "$PIDFILE"; exit 0; fi
if ! tr '\0' ' ' < "/proc/$p/cmdline" | grep -q "prefect server start"; then
  echo "not stopping pid $p: it is not 'prefect server start' (stale PID file removed)"
  rm -f "$PIDFILE"; exit 0
fi
kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true
for _ in $(seq 1 120); do alive "$p" || break; sleep 0.25; done
if alive "$p"; then echo "Prefect server $p ignored SIGTERM for 30s: SIGKILL"; kill -KILL -- "-$p" 2>/dev/null || true; fi
rm -f "$PIDFILE"
echo "stopped Prefect server $p"
