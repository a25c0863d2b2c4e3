#!/usr/bin/env bash
# Stops the Prefect server that start.sh started on $PREFECT_PORT (default 14200): SIGTERM to the
# process group led by the recorded PID (start.sh runs it under setsid), SIGKILL after 30 s.
# A PID that now belongs to another program (stale file) is left alone.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
stop_pgroup "$CI_RUN_DIR/prefect-${PREFECT_PORT:-14200}.pid" "prefect server start" 30
