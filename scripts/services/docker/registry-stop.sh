#!/usr/bin/env bash
# Stops the registry that registry-start.sh started, by its recorded PID only.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../common.sh"
stop_pidfile "$CI_RUN_DIR/registry.pid" docker-registry
