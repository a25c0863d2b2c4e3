#!/usr/bin/env bash
# Stops the moto server that start.sh started, by its recorded PID only. Leaves dockerd running
# (../docker/stop.sh stops it).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
stop_pidfile "$CI_RUN_DIR/moto.pid" "${MOTO_COMM:-moto_server}" 20
