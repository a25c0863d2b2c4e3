#!/usr/bin/env bash
# Stops the dockerd that start.sh started, by its recorded PID only (containerd goes with it).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
stop_pidfile "$CI_RUN_DIR/dockerd.pid" dockerd 30
