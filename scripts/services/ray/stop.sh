#!/usr/bin/env bash
# Stops the Ray head that start.sh started: SIGTERM to the recorded `ray start --block` PID, which
# tears down everything it started. Never `ray stop` (it kills every Ray process on the host by name).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
stop_pidfile "$CI_RUN_DIR/ray.pid" "${RAY_COMM:-ray}" 30
